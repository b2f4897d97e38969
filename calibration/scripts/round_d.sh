#!/usr/bin/env bash
# Round d on one H200 (issues 11 and 15): MoE/FP8 tables and the HF MoE step (clean timing process), the
# MoE kernel counts (profiled, separate process, after), then torch.compile start-up for two model sizes
# (fresh child processes). Everything lands in /tmp/d, packed into $OUT/round_d.tgz after each stage.
set -o pipefail
export PYTHONUNBUFFERED=1
W=/tmp/d; mkdir -p $W
pack() { tar czf $OUT/round_d.tgz.tmp -C /tmp d && mv $OUT/round_d.tgz.tmp $OUT/round_d.tgz; }
timeout ${MOE_S:-170} python3 -m calibration.scripts.moe_fp8 --out $W 2>&1 | tee $W/moe_fp8.log | tail -20; pack
timeout 50 python3 -m calibration.scripts.moe_fp8 --out $W --job counts 2>&1 | tee $W/moe_counts.log | tail -14; pack
python3 -m calibration.scripts.engine_loop --out $W --sections compile --deadline ${COMPILE_S:-330} --compile-budget ${COMPILE_S:-330} \
  --compile-runs qwen3-0.6b:2:static,llama3-8b:2:static,llama3-8b:8:static,qwen3-0.6b:28:static,llama3-8b:32:static,qwen3-0.6b:2:dynamic \
  2>&1 | tee $W/compile.log | tail -20; pack
ls -la $W
