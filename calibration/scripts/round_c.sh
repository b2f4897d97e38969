#!/usr/bin/env bash
# Round c on one H200 (issue 11): the forward's calibration (child_timing, no compiled rows) and the engine
# loop + generate() in the same machine, then (a separate, profiled process, last) the HF decode traces.
# Everything lands in /tmp/c and is packed into $OUT/round_c.tgz after each stage.
set -o pipefail
export PYTHONUNBUFFERED=1
W=/tmp/c; mkdir -p $W
pack() { tar czf $OUT/round_c.tgz.tmp -C /tmp c && mv $OUT/round_c.tgz.tmp $OUT/round_c.tgz; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $W/nvidia_smi.csv
python3 -m calibration.child_timing --out $W --no-compiled 2>&1 | tee $W/timing.log | grep -v '^qwen\|^llama' ; pack
python3 -m calibration.scripts.engine_loop --out $W --sections loop,capture,hf_generate --deadline ${EL_DEADLINE:-260} 2>&1 | tee $W/engine_loop.log | tail -40; pack
python3 -m calibration.child_counts --out $W --job hf_traces 2>&1 | tee $W/counts_hf.log | tail -8; pack
ls -la $W
