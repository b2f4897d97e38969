"""Is the compiled-row miss host drift? Interleaved timing of qwen3-0.6b compiled at batch 1, 4 and 16
(ctx 512) with an eager (fusion none, batch 1) monitor, on the GPU (torch only):

    OUT=<dir> PYTHONPATH=. python3 calibration/compiled_drift.py

The calibration run measured compiled batch 1 and batch 16 minutes apart (18.7 vs 14.4 ms for the same
424 launches). Here each round times 10 single steps of every runner back to back, 8 rounds, so host
speed drift affects all of them alike; if batch 16 is still faster within a round, the difference is
in the compiled code (e.g. its size specialisation), not in the host. Writes OUT/compiled_drift.json
after every round.
"""
import json, os, time, torch
from calibration.reference_decoder import Runner, make_weights
from calibration.measure import _time_steps
from simulator.models import PRESETS

OUT = os.environ["OUT"]
w = make_weights(PRESETS["qwen3-0.6b"])
res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "compile_s": {}, "rounds": []}
runners = {}
for b in (1, 16, 4):
    r = Runner("qwen3-0.6b", "compiled", b, 512, weights=w)
    t0 = time.perf_counter()
    for _ in range(3):
        r.step()
    torch.cuda.synchronize()
    res["compile_s"][b] = time.perf_counter() - t0
    runners[f"compiled_b{b}"] = r
    print("compiled", b, round(res["compile_s"][b], 1), flush=True)
runners["eager_none_b1"] = Runner("qwen3-0.6b", "none", 1, 512, weights=w)
for rnd in range(8):
    row = {}
    for name, r in runners.items():
        step, host = _time_steps(r.step, 10)
        row[name] = {"step_ms": step, "host_ms": host}
    res["rounds"].append(row)
    print(rnd, {k: round(v["step_ms"]["p50"], 2) for k, v in row.items()}, flush=True)
    json.dump(res, open(f"{OUT}/compiled_drift.json", "w"), indent=1)
