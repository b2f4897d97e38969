"""Round x: launchsim's predictions for round x's rows, written and committed before the rows were measured (round_v.py --rows).

    python -m calibration.scripts.round_x_predict   # rewrites calibration/measured/h200-round-x/predicted_before.json
"""
import json, subprocess
from simulator.engine.plan import PlanError
from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode
from calibration.scripts.round_v import parse_rows
ROWS = "gemma-2-2b@4224:1,8,32 phi-3-mini-4k@3072:1,8,16 llama3-8b@4096:1,8,32 qwen2-1.5b@4096:1,8,32"
cm = CostModel(load_profile("h200"))
out = []
for m_, b, c in parse_rows(ROWS):
    m = load_model(f"calibration/configs/hf/{m_}.json")
    st = build_step(m, decode(b, c), "none", "hf", max_cache_len=c + 128)
    e, _ = simulate(st, cm, "none")
    r = {"model": m_, "batch": b, "ctx": c, "max_cache_len": c + 128, "eager_ms": e.step_s * 1e3}
    try:
        f, _ = simulate(st, cm, "full"); r["full_ms"] = f.step_s * 1e3
    except PlanError as x:
        r["full_refused"] = str(x)[:100]
    out.append(r); print(r)
commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
json.dump({"kind": "launchsim-round-x-predictions", "made_before_measuring": True, "commit": commit, "rows_spec": ROWS,
           "profile": "h200", "impl": "hf", "rows": out}, open("calibration/measured/h200-round-x/predicted_before.json", "w"), indent=1)
