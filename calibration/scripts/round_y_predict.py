"""Round y: launchsim's full-graph and piecewise predictions for round y's rows, written and committed before the
rows were measured (calibration/scripts/round_y.py).

    python -m calibration.scripts.round_y_predict   # rewrites calibration/measured/h200-round-y/predicted_before.json
"""
import json
import os
import subprocess

from simulator.engine.plan import PlanError
from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.models import PRESETS, load_model
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode

from calibration.scripts.round_y import GRID

HF = ("qwen3-0.6b", "qwen3-4b", "llama-3.2-1b", "llama3-8b", "qwen2-1.5b", "mistral-7b-v0.3", "phi-3-mini-4k",
      "gemma-2-2b")
cm = CostModel(load_profile("h200"))
out = []
rows = [("hf", m, b, c) for m in HF for c, bs in GRID for b in bs] + [("control", "qwen3-0.6b", b, 512)
                                                                      for b in (1, 8, 32)]
for impl, name, b, c in rows:
    if impl == "hf":
        st = build_step(load_model(f"calibration/configs/hf/{name}.json"), decode(b, c), "none", "hf",
                        max_cache_len=c + 128)
    else:
        st = build_step(PRESETS[name], decode(b, c), "none")
    r = {"impl": impl, "model": name, "batch": b, "ctx": c}
    for mode in ("full", "piecewise"):
        try:
            res, _ = simulate(st, cm, mode)
        except PlanError as x:  # a full sliding window: transformers' step does not capture (round x)
            r[f"{mode}_refused"] = str(x)[:100]
            continue
        r[f"{mode}_ms"] = round(res.step_s * 1e3, 4)
    out.append(r)
    print(r)
commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
os.makedirs("calibration/measured/h200-round-y", exist_ok=True)
with open("calibration/measured/h200-round-y/predicted_before.json", "w") as f:
    json.dump({"kind": "launchsim-round-y-predictions", "made_before_measuring": True, "commit": commit,
               "profile": "h200", "rows": out}, f, indent=1)
