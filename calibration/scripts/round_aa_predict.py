"""Round aa: launchsim's predictions for round aa's rows (seven transformers decoders it never saw), written and
committed before the rows were measured (calibration/scripts/round_aa.py).

    python -m calibration.scripts.round_aa_predict [--out FILE]
    # default FILE: calibration/measured/h200-round-aa/predicted_before.json

Per row: kernels per eager step, eager step on the profile's (fast) host, full graph, piecewise graph; the
implementation `hf` (transformers' static cache of ctx + 128 slots, SDPA), fusion none, profile h200.
"""
import argparse
import json
import os
import subprocess

from simulator.engine.plan import PlanError
from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode

from calibration.scripts.round_aa import GRID, MODELS, ROOM, UNSEEN_DIR


def predict_rows() -> list[dict]:
    cm = CostModel(load_profile("h200"))
    out = []
    for name in MODELS:
        m = load_model(os.path.join(UNSEEN_DIR, name + ".json"))
        for c, bs in GRID:
            for b in bs:
                st = build_step(m, decode(b, c), "none", "hf", max_cache_len=c + ROOM)
                r = {"model": name, "batch": b, "ctx": c, "max_cache_len": c + ROOM}
                e, _ = simulate(st, cm, "none")
                r["kernels"], r["eager_ms"] = e.kernels, round(e.step_s * 1e3, 4)
                for mode in ("full", "piecewise"):
                    try:
                        res, _ = simulate(st, cm, mode)
                    except PlanError as x:
                        r[f"{mode}_refused"] = str(x)[:100]
                        continue
                    r[f"{mode}_ms"] = round(res.step_s * 1e3, 4)
                out.append(r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="calibration/measured/h200-round-aa/predicted_before.json")
    a = ap.parse_args()
    rows = predict_rows()
    for r in rows:
        print(r)
    commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"kind": "launchsim-round-aa-predictions", "made_before_measuring": True, "commit": commit,
                   "profile": "h200", "impl": "hf", "fusion": "none", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
